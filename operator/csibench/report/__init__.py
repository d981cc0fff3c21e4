"""Reading results: render a run's step table (more formats and comparison come with the results work)."""
