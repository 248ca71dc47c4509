"""Training over row partitions that stay where they are (Dask): statistics, GLM selection, worker logs."""
