"""Where a job's outputs and runs are kept, and how they are read back."""
