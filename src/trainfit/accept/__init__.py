"""Closed-loop acceptance run (``trainfit accept``) and the coding-task reward sandbox.

``sandbox`` and ``reward`` need only the standard library and pytest; ``loop`` and ``checks``
need the ``trl`` extra (torch, transformers, trl) and import it lazily. ``multiproc`` launches
``dist_worker`` under torchrun for ``--nproc N`` (DDP through accelerate; gloo on CPU, nccl on CUDA).
"""
