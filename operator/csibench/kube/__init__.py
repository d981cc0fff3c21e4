"""The kube adapter: rate-limited JSON client, watches with client-clock timestamps, resource paths, labels."""
