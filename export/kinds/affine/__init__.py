"""The affine (linear prefix) kind: reading an export back and regenerating its files."""
