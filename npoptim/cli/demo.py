"""``npoptim demo``: a matrix-factorisation recommender trained on synthetic data.

A 200,000-row item embedding table (and a smaller user table) is fitted to synthetic ratings
``r = <u, v> + noise`` with Zipf-distributed item popularity, three ways:

1. SparseAdam on row-sparse gradients: each batch touches a few thousand item rows, and only
   those rows (and their moments) are read and written;
2. dense Adam: the same gradients scattered into full-size arrays, every row updated;
3. dense AdamW with linear warmup then cosine decay (``SequentialLR``), the usual recipe.

It prints the validation loss and time per epoch of each, and the speed ratio of the sparse
path over the dense one.
"""
import time

import numpy as np

import npoptim
from npoptim import lr_scheduler


def add_arguments(parser):
    parser.add_argument("--items", type=int, default=200_000, help="item table rows")
    parser.add_argument("--users", type=int, default=2_000, help="user table rows")
    parser.add_argument("--dim", type=int, default=32, help="embedding width")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batches", type=int, default=50, help="batches per epoch")
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)


class Problem:
    """Synthetic ratings from hidden factors; the model's tables start small and random."""

    def __init__(self, items, users, dim, seed):
        rng = np.random.default_rng(seed)
        self.items, self.users, self.dim = items, users, dim
        self.true_items = rng.standard_normal((items, dim)).astype(np.float32) / dim ** 0.25
        self.true_users = rng.standard_normal((users, dim)).astype(np.float32) / dim ** 0.25
        popularity = np.cumsum(1.0 / np.arange(1, items + 1) ** 1.05)
        self.popularity_cdf = popularity / popularity[-1]
        self.rng = rng
        self.init_items = (0.01 * rng.standard_normal((items, dim))).astype(np.float32)
        self.init_users = (0.01 * rng.standard_normal((users, dim))).astype(np.float32)
        self.validation = self.batch(20_000)

    def batch(self, size):
        item = np.minimum(np.searchsorted(self.popularity_cdf, self.rng.random(size)),
                          self.items - 1)
        user = self.rng.integers(0, self.users, size=size)
        rating = np.einsum("ij,ij->i", self.true_users[user], self.true_items[item])
        rating += 0.1 * self.rng.standard_normal(size).astype(np.float32)
        return user, item, rating.astype(np.float32)


def loss_and_row_grads(user_table, item_table, user, item, rating):
    """Mean squared error and the gradient of each lookup's row."""
    u, v = user_table[user], item_table[item]
    err = np.einsum("ij,ij->i", u, v) - rating
    scale = (2.0 / rating.size) * err[:, None]
    return float(np.mean(err * err)), scale * v, scale * u


def batch_grads(problem, users, items, batch, sparse):
    """The two tables' gradients: row-sparse gradients (O(touched rows), whatever the table's
    size), or the same rows scattered densely."""
    user, item, rating = batch
    _, user_rows, item_rows = loss_and_row_grads(users, items, user, item, rating)
    start = time.perf_counter()
    if sparse:
        grads = [npoptim.row_sparse_grad(user, user_rows, problem.users),
                 npoptim.row_sparse_grad(item, item_rows, problem.items)]
    else:
        grads = [np.zeros_like(users), np.zeros_like(items)]
        np.add.at(grads[0], user, user_rows)
        np.add.at(grads[1], item, item_rows)
    return grads, time.perf_counter() - start


def train(problem, name, make_optimizer, sparse, epochs, batches, batch_size, quiet=False):
    """Train both tables from the problem's initial values.

    Returns the fastest epoch's update time: building the gradient (row-sparse or dense) plus the
    optimizer step, the part that differs between the runs.
    """
    users, items = problem.init_users.copy(), problem.init_items.copy()
    optimizer, scheduler = make_optimizer([users, items], epochs * batches)
    problem.rng = np.random.default_rng(1)  # the same batches for every run
    update_times = []
    for epoch in range(epochs):
        start, update = time.perf_counter(), 0.0
        for _ in range(batches):
            grads, build = batch_grads(problem, users, items, problem.batch(batch_size), sparse)
            step_start = time.perf_counter()
            optimizer.step(grads)
            update += build + time.perf_counter() - step_start
            if scheduler is not None:
                scheduler.step()
        update_times.append(update)
        if not quiet:
            val, _, _ = loss_and_row_grads(users, items, *problem.validation)
            print(f"  {name:<13} epoch {epoch + 1}: validation MSE {val:.4f}   epoch "
                  f"{time.perf_counter() - start:.2f} s, of which updates {update:.2f} s")
    return min(update_times)


def run(args):
    print(f"npoptim {npoptim.__version__} demo: matrix factorisation, {args.items:,} items x "
          f"{args.dim}, {args.users:,} users, {args.batches} batches of {args.batch_size} per "
          "epoch")
    problem = Problem(args.items, args.users, args.dim, args.seed)
    lr = args.lr

    def sparse_adam(params, total):
        return npoptim.SparseAdam(params, lr=lr), None

    def dense_adam(params, total):
        return npoptim.Adam(params, lr=lr), None

    def adamw_cosine(params, total):
        opt = npoptim.AdamW(params, lr=lr, weight_decay=1e-4)
        warmup = max(1, total // 10)
        sched = lr_scheduler.SequentialLR(
            opt, [lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup),
                  lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup)],
            milestones=[warmup])
        return opt, sched

    runs = [("SparseAdam", sparse_adam, True), ("Adam", dense_adam, False),
            ("AdamW+cosine", adamw_cosine, False)]
    # one tiny run of each first, so that the timings exclude Numba's compilation
    tiny = Problem(100, 10, args.dim, 0)
    for name, make, sparse in runs:
        train(tiny, name, make, sparse, 1, 2, 8, quiet=True)
    print("SparseAdam: row-sparse gradients, only touched rows move (lazy)\n"
          "Adam: dense gradients, every row updated\n"
          "AdamW+cosine: dense, linear warmup then cosine decay")
    t_sparse, t_dense, t_cos = (
        train(problem, name, make, sparse, args.epochs, args.batches, args.batch_size)
        for name, make, sparse in runs)
    print(f"\nupdate time per epoch (gradient + step, fastest epoch): SparseAdam "
          f"{t_sparse:.3f} s, Adam {t_dense:.3f} s, AdamW+cosine {t_cos:.3f} s")
    print(f"SparseAdam's updates are {t_dense / t_sparse:.1f}x faster than dense Adam's")
    return 0
