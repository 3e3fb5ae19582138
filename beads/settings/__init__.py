"""Settings: `config.yaml` and the registry of every layer's sections, the machine-local
settings, and the guarded settings this machine approved (`gc trust`)."""
