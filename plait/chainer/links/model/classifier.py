"""Classifier: wraps a predictor and reports loss (and accuracy) against labels."""
from typing import Any, Callable

from ... import link
from ...functions.evaluation import accuracy
from ...functions.loss import softmax_cross_entropy


class Classifier(link.Chain):
    """A chain computing lossfun(predictor(x), t); keeps y, loss and accuracy of the last call.

    Set compute_accuracy = False to skip accfun (accuracy is then None).
    """

    compute_accuracy = True

    def __init__(
        self,
        predictor: link.Link,
        lossfun: Callable = softmax_cross_entropy.softmax_cross_entropy,
        accfun: Callable = accuracy.accuracy,
    ) -> None:
        super().__init__(predictor=predictor)
        self.lossfun = lossfun
        self.accfun = accfun
        self.y = None
        self.loss = None
        self.accuracy = None

    def __call__(self, x: Any, t: Any) -> Any:
        """The loss of predictor(x) against labels t (stores y, loss and accuracy)."""
        self.y = None
        self.loss = None
        self.accuracy = None
        self.y = self.predictor(x)
        self.loss = self.lossfun(self.y, t)
        if self.compute_accuracy:
            self.accuracy = self.accfun(self.y, t)
        return self.loss
