"""What several test modules share: the service harness, the local download mirror, face metrics and the
TensorFlow reference runner."""
