"""Spatial pooling functions (max, average, unpooling, spatial pyramid)."""
