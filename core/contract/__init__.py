"""The dataset contract: what a converted dataset folder holds and how a reader finds and reads it.

Shared by the pipeline (which writes datasets) and the training job (which reads them), so it
imports neither Beam nor TensorFlow and does no I/O of its own: callers pass a `read_text(path)`
function over their own file system (Beam's FileSystems, tf.io.gfile, pathlib).

- `layout`: the names of the files in a dataset folder (shards, error reports, manifests).
- `manifest`: manifest.json, the commit point and the description of the data;
  `manifest.schema.json`, its JSON Schema, shipped in the package (`manifest.json_schema()`).
- `versions`: `ROOT/<version>/` folders and the `ROOT/LATEST` pointer written by `refresh`.
- `features`: image feature keys and the parse spec a reader builds from a manifest.
- `tf_import`: how a reader imports TensorFlow: only when called, quietly, and without it one line
  naming the extra to install (the trainer, `inspect --verify` and `--contact_sheet`).
- `readers`: a disjoint, balanced set of shards for each of N readers.
"""
