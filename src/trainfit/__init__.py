"""trainfit: will this post-training run fit, on how many cards, at what cost?"""

__version__ = "0.1.0"
