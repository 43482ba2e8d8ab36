"""Links that compute losses over large vocabularies (hierarchical softmax, negative sampling)."""
