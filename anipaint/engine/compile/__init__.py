"""Building the fast backends: the compiled (torch.export + AOTInductor) form, int8, precision choices."""
