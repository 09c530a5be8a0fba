"""Dataset families: one small module each, registered by name in pipeline/data/datasets.json."""
