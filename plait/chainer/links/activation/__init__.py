"""Activation links with learned parameters."""
