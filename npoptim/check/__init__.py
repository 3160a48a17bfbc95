"""``npoptim check``: the golden suite run straight through another implementation, with no
results file to write.

The implementation is a ``torch.optim.Optimizer`` subclass, an optax
``GradientTransformation`` factory, a Keras 3 optimizer class, or a ``make_step`` in
:mod:`npoptim.testing`'s protocol. For each golden case of its optimizer, the case's
hyperparameters are mapped to the implementation's names through the flavors (torch's names
are the cases' own; optax's and Keras's come from :mod:`npoptim.frameworks`), gradients fed
as the implementation takes them (dense; CSR as torch's sparse COO; refused with the reason
where it takes none), the lr set per step and the objective given as the closure; the
parameters and the state it exposes are judged by each case's own tolerance, known framework
bugs reported as known, and a failure diagnosed (:mod:`npoptim.diagnose`).

* :mod:`~npoptim.check.run`: the driver (:func:`~npoptim.check.run.implementation`,
  :func:`~npoptim.check.run.run`, :func:`~npoptim.check.run.format_check`);
* :mod:`~npoptim.check.torch`, :mod:`~npoptim.check.optax`, :mod:`~npoptim.check.keras`,
  :mod:`~npoptim.check.callable`: one adapter per kind of implementation (the frameworks are
  imported inside their functions only: npoptim depends on none of them);
* :mod:`~npoptim.check.constructors`: which framework constructor computes a case;
* :mod:`~npoptim.check.spec`: ``MODULE:NAME`` and the usage errors.

The frameworks' known bugs are :mod:`npoptim.frameworks.known_bugs`'s; torch's steps are
:mod:`npoptim.golden.torch_replay`'s (which :mod:`npoptim.golden.regenerate` measures torch
with).
"""
