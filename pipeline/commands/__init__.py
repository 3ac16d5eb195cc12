"""One module per command: `convert` (the default), `refresh`, `inspect`, and `dataflow` (the
`python -m pipeline.dataflow` helper). Each has `main(argv) -> exit code`; none imports another."""
