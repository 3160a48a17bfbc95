"""Golden trajectories: the ``reference_results/`` suite, its schema, generation and checking.

* :mod:`npoptim.golden.cases`: THE case-definition table (add rows here for a new optimizer),
  and :class:`~npoptim.golden.cases.Row`, the one row type of the three families.
* :mod:`npoptim.golden.inputs`: what the rows name: the RNG, lr schedules, parameter
  initialisers, gradient patterns and objectives.
* :mod:`npoptim.golden.flags`: the flags of cases, their notes, and their detection.
* :mod:`npoptim.golden.schema`: the file format (version 4; reads 1 to 3), strict loading,
  the JSON Schema.
* :mod:`npoptim.golden.codec`: JSON text and values: the exact float encoding, the
  hyperparameters to JSON and back, a case's gradient as the optimizer takes it.
* :mod:`npoptim.golden.flavor_cases`: the flavor cases (other frameworks' conventions,
  :mod:`npoptim.flavors`), made from the table where they change the math;
  :mod:`npoptim.golden.precision_cases`: the 16-bit cases (:mod:`npoptim.precision`).
* :mod:`npoptim.golden.generate`: building cases with npoptim.
* :mod:`npoptim.golden.replay`: replaying cases through npoptim or any step function (what
  ``npoptim verify``, :mod:`npoptim.testing` and ``npoptim diagnose`` run);
  :mod:`npoptim.golden.torch_replay`: a ``torch.optim.Optimizer`` as such a step function
  (what ``npoptim check --torch`` runs and the regeneration measures torch with).
* :mod:`npoptim.golden.compare`: errors, tolerances and the report of ``npoptim verify``;
  :mod:`npoptim.golden.verify`: a verify run (which cases, whose results, a report per case
  as it is judged).
* ``python -m npoptim.golden.regenerate``: rewrite ``reference_results/`` (bit-for-bit).

:mod:`npoptim.testing` is the helper for other projects' test suites.
"""
from npoptim.golden.schema import (SCHEMA_NAME, SCHEMA_VERSION, Case, GoldenFileError,
                                   ResultCase, load, load_all)

__all__ = ["SCHEMA_NAME", "SCHEMA_VERSION", "Case", "ResultCase", "GoldenFileError", "load",
           "load_all"]
