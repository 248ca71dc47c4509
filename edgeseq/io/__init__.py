"""Reading and writing files: data tables, GROUPS.json, model files, cost provenance."""
