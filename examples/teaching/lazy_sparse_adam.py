"""
Lazy SparseAdam vs dense Adam on embedding rows
===============================================

An embedding table gets a gradient only in the rows of the batch. ``npoptim.SparseAdam`` takes
it as a CSR row gradient and updates only those rows ("lazy"): a row not in the batch keeps
its value *and its moments*. Dense ``npoptim.Adam`` given the same gradient as a dense array
(zeros elsewhere) keeps moving every row it has seen, on momentum alone, and decays all
moments every step.
"""

# %%
import numpy as np

import npoptim

rows, width, lr = 8, 4, 0.01
rng = np.random.default_rng(0)
batches = [[1, 3], [3, 5], [5, 6], [1, 6]]          # row indices of each step's batch
values = [rng.standard_normal((2, width)) for _ in batches]

lazy = np.ones((rows, width))
dense = np.ones((rows, width))
sparse_opt = npoptim.SparseAdam([lazy], lr=lr)
dense_opt = npoptim.Adam([dense], lr=lr, eps=1e-8)

# %%
for step, (batch, value) in enumerate(zip(batches, values), start=1):
    before_lazy, before_dense = lazy.copy(), dense.copy()
    grad = npoptim.embedding_row_grad(batch, value, num_rows=rows)   # CSR, 2 stored rows
    sparse_opt.step([grad])
    dense_opt.step([grad.toarray()])
    moved_lazy = np.flatnonzero(np.any(lazy != before_lazy, axis=1)).tolist()
    moved_dense = np.flatnonzero(np.any(dense != before_dense, axis=1)).tolist()
    print(f"step {step}: batch rows {batch}  SparseAdam moved {moved_lazy}  "
          f"Adam moved {moved_dense}")
    assert moved_lazy == sorted(batch)
    assert set(moved_dense) >= set(batch)

# %%
# rows never in a batch: untouched by both; rows seen once keep drifting under dense Adam
never = [0, 2, 4, 7]
assert np.all(lazy[never] == 1) and np.all(dense[never] == 1)
last_moved = np.flatnonzero(np.any(dense != before_dense, axis=1)).tolist()
print(f"at the last step dense Adam moved rows {last_moved}, the batch was {batches[-1]}")
assert last_moved == [1, 3, 5, 6]
# at step 1 both made the same Adam step on the batch rows (ε placement aside: 1e-8 here)
print(f"largest |SparseAdam - Adam| after 4 steps: {np.max(np.abs(lazy - dense)):.2e}")
assert np.max(np.abs(lazy - dense)) > 1e-4
