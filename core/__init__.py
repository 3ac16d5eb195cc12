"""What the conversion job (pipeline/, transforms/) and the trainer share: the dataset contract
(core.contract, the only part the trainer imports), storage for local and gs:// paths, local-file
safety, and TFRecord framing. Imports nothing from the packages above it."""
