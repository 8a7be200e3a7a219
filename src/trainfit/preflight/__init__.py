"""Pre-flight: audit the machine, check a card against it, record a run, diagnose failures.

Modules: ``shell`` (the one way external commands run), ``audit``, ``checkpoint``, ``check``,
``record``, ``oom`` (CUDA/HIP out-of-memory message parsing) and ``diagnose``.
"""
