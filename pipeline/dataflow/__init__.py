"""Running the pipeline on Google Cloud Dataflow: the settings of configs/cloud/dataflow.yaml and
what they become for each way of launching a job, and the Flex Templates.

- `settings`: loading the settings file (placeholders, `--set`, unknown sections and keys).
- `launch_flags`: the `job:` settings as Beam flags, `gcloud dataflow flex-template run` flags and
  a flexTemplates:launch request, all rendered from one table of job keys.
- `flex_template`: the templates' parameters and metadata, from the conversion flag table
  (pipeline.flags), and the entry point the template launcher runs.

Imports go settings -> launch_flags -> flex_template. The command line (`python -m
pipeline.dataflow`) is pipeline.commands.dataflow.
"""
