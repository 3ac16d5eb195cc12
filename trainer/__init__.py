"""Training job for the datasets the conversion pipeline writes (`python -m trainer --help`).

Modules, one job each:
  errors      -- the exceptions the CLI turns into one readable line
  manifest_io -- reading and checking `manifest.json` (tf.io.gfile: local or gs://)
  input_fn    -- the tf.data input pipelines (images and tabular), TPU-reference style
  data_statistics -- the training split's column statistics and label range, read before a fresh model
  strategy    -- TPU / multi-GPU / default distribution strategy and mixed precision
  model       -- the Keras models (small CNN, keras.applications with weights=None, dense)
  model_dir   -- model.json: what the model in a --model_dir was built for, compared before resuming
  loop        -- the distributed custom training loop, checkpoints, TensorBoard, export
  train       -- the command line
"""
