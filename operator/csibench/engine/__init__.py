"""The run engine: plan the steps, submit batches, watch for terminal states, time them, clean up."""
