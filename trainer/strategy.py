"""Which devices train: a TPU (named by --tpu or $TPU_NAME) through TPUClusterResolver and
TPUStrategy; else several GPUs with MirroredStrategy; else TensorFlow's default strategy (one GPU
or the CPU). Also the mixed-precision policy that suits the device."""

from __future__ import annotations

import logging
import os

import keras
import tensorflow as tf

from trainer.errors import TrainerError

_LOG = logging.getLogger(__name__)

TPU_ENV = "TPU_NAME"


def tpu_name(flag: str | None) -> str | None:
    """--tpu if given, else $TPU_NAME ("local" on a TPU VM, a node name or grpc:// address otherwise)."""
    return flag or os.environ.get(TPU_ENV) or None


def make_strategy(tpu: str | None = None) -> tf.distribute.Strategy:
    name = tpu_name(tpu)
    if name:
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except Exception as e:  # metadata server, gRPC, DNS: all mean "no TPU"
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise TrainerError(
                f"cannot connect to TPU {name!r} (--tpu / ${TPU_ENV}): {type(e).__name__}: {reason}"
            ) from e
        strategy = tf.distribute.TPUStrategy(resolver)
        _LOG.info("TPU %s: %d cores", name, strategy.num_replicas_in_sync)
        return strategy
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        strategy = tf.distribute.MirroredStrategy([gpu.name for gpu in gpus])
        _LOG.info("%d GPUs: MirroredStrategy", len(gpus))
        return strategy
    _LOG.info("one device: %s", gpus[0].name if gpus else "CPU")
    return tf.distribute.get_strategy()


def check_tpu_paths(tpu: str | None, *paths: str) -> None:
    """A TPU reached over the network (a TPU node, not a TPU VM's 'local') reads the data and
    writes checkpoints from its own hosts, which see only gs:// paths."""
    name = tpu_name(tpu)
    if name and name != "local":
        for path in paths:
            if not path.startswith("gs://"):
                _LOG.warning("%s is not a gs:// path: a remote TPU's hosts cannot read or write it", path)


def device_kind(strategy: tf.distribute.Strategy) -> str:
    if isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)):
        return "TPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"


def set_mixed_precision(enabled: bool, strategy: tf.distribute.Strategy) -> str:
    """Set Keras' global dtype policy: mixed_bfloat16 on TPU (and CPU), mixed_float16 on GPU
    (the trainer then scales the loss); float32 when not enabled. Returns the policy name."""
    kind = device_kind(strategy)
    policy = "float32"
    if enabled:
        policy = "mixed_float16" if kind == "GPU" else "mixed_bfloat16"
        if kind == "CPU":
            _LOG.warning("mixed precision on CPU (bfloat16) is for testing: it is rarely faster there")
    keras.mixed_precision.set_dtype_policy(policy)
    return policy
