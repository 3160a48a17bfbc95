"""How the matrix optimizers fold a tensor's dimensions into the sides they precondition
(Shampoo's ``shape_interpretation``, SOAP's ``merge_dims``): runs of consecutive sizes
multiplied together while the product stays at most a bound. Three sources write the rule
differently:

* ``"pytorch_optimizer"``: kozistr/pytorch_optimizer ``pytorch_optimizer/optimizer/utils/
  shape.py`` ``merge_small_dims`` (4.1.0; Shampoo's and SOAP's there): a size that would take
  the product past the bound closes the side and starts the next one; a shape that merges
  into a single side becomes ``(1,)``.
* ``"authors"``: nikhilvyas/SOAP ``soap.py`` ``merge_dims``: a size that would take the
  product past the bound closes the side (a size alone past it is a side of its own); a
  trailing product of 1 is dropped.
* ``"optax_shampoo"``: optax-shampoo 0.0.6 ``optax_shampoo/distributed_shampoo.py``
  ``merge_small_dims`` (google-research ``scalable_shampoo/optax``): a size that would take
  the product past the bound closes the side (a product of 1 is no side); a shape that
  merges into a single side stays that side (``(3, 6)`` is ``(18,)``), a shape of ones is
  ``(1,)`` and ``()`` stays ``()``.
* ``"heavyball"``: HomebrewML/HeavyBall 3.2.1 ``heavyball/utils.py`` ``dim_merger``: the first
  size is kept as a side of its own (the fan-out is never merged into the fan-in), and the
  rest are merged as the authors' rule merges them, but from the last size backwards (a
  ``(128, 64, 3, 3)`` kernel is ``(128, 576)`` under 1024); a trailing product of 1 is
  dropped even when nothing else is left (``(5, 1)`` is ``(5,)``).
"""


def merge_small_dims(shape, max_dim, rule="pytorch_optimizer"):
    """The sides of ``shape`` merged under ``max_dim`` by ``rule`` (see the module
    docstring), as a tuple."""
    if rule == "heavyball":
        merged, current = [], 1
        for side in reversed(tuple(shape)[1:]):
            if current * side > max_dim:
                if current > 1:
                    merged.append(current)
                    current = side
                else:
                    merged.append(side)
                    current = 1
            else:
                current *= side
        if current > 1:
            merged.append(current)
        return (shape[0],) + tuple(reversed(merged))
    if rule == "pytorch_optimizer":
        merged, product = [], 1
        for side in shape:
            product *= side
            if product > max_dim:
                merged.append(product // side)
                product = side
        merged.append(product)
        return tuple(merged) if len(merged) > 1 else (1,)
    if rule == "optax_shampoo":
        if shape and all(side == 1 for side in shape):
            return (1,)
        merged, product = [], 1
        for side in shape:
            if product * side <= max_dim:
                product *= side
            else:
                if product > 1:
                    merged.append(product)
                product = side
        if product > 1:
            merged.append(product)
        return tuple(merged)
    merged, current = [], 1
    for side in shape:
        if current * side > max_dim:
            if current > 1:
                merged.append(current)
                current = side
            else:
                merged.append(side)
                current = 1
        else:
            current *= side
    if current > 1 or not merged:
        merged.append(current)
    return tuple(merged)
