"""The ``anipaint`` command, thin over the library: one module per verb group."""
