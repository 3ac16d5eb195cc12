"""The trainer's flags (trainer.flags, read without TensorFlow) offer exactly the architectures the
model builds: the one list the others import cannot name a keras class itself."""

from __future__ import annotations

from trainer import flags, model


def test_every_architecture_the_flags_offer_is_built():
    assert flags.ARCHITECTURES == ("small_cnn", *model.APPLICATIONS)
