"""Planning the workflow, without torch: the config and paper files, their schemas, the settings
of every job, the file layout, and the plan from requested tables to the runs that fill them.
Snakemake imports this package in every process it starts; a test keeps torch out of it."""
