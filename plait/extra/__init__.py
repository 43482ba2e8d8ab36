"""Extra algorithms under thinc's module path `thinc.extra` (the beam search of spaCy's parser)."""
