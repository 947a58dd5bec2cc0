"""The model store: the style table, licences, original sources and their downloads, converted artefacts."""
