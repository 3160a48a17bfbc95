"""The optimizer API: param groups, views, state_dict, and bad input that changes nothing.

Every bad-input test snapshots all parameters and all state first, triggers the error, and
checks that nothing changed: a step either completes or raises before writing anything.
"""
import copy

import numpy as np
import pytest
import scipy.sparse

import npoptim


def snapshot(opt):
    return ([p.copy() for p in opt.params], copy.deepcopy(opt.state),
            copy.deepcopy([{k: v for k, v in g.items() if k != "params"}
                           for g in opt.param_groups]))


def assert_unchanged(opt, snap):
    params, state, groups = snap
    for p, q in zip(opt.params, params):
        np.testing.assert_array_equal(p, q)
    assert set(opt.state) == set(state)
    for i in state:
        assert set(opt.state[i]) == set(state[i])
        for k, v in state[i].items():
            np.testing.assert_array_equal(opt.state[i][k], v)
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == groups


def stepped(name="Adam", **kw):
    """An optimizer over three params that has already taken two steps (so state exists)."""
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((6, 3)), rng.standard_normal(4), rng.standard_normal((2, 2, 2))]
    opt = getattr(npoptim, name)(params, **kw)
    for _ in range(2):
        opt.step([rng.standard_normal(p.shape) for p in params])
    return opt


def good_grads(opt):
    return [np.ones_like(p) for p in opt.params]


# ------------------------------------------------------------------- construction errors
@pytest.mark.parametrize("params,error,match", [
    ([], ValueError, "empty parameter list"),
    (np.zeros(3), TypeError, "iterable"),
    ([np.zeros(3, np.int64)], TypeError, "float32 or float64"),
    ([np.zeros(3, np.complex128)], TypeError, "float32 or float64"),
    ([[1.0, 2.0]], TypeError, "NumPy arrays"),
    ([np.zeros(3, np.float16)], TypeError, "float32 or float64"),
])
def test_bad_params_raise(params, error, match):
    with pytest.raises(error, match=match):
        npoptim.Adam(params)


def test_read_only_param_raises():
    p = np.zeros(3)
    p.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        npoptim.Adam([p])


def test_same_array_twice_and_overlapping_views_raise():
    p = np.zeros((4, 4))
    with pytest.raises(ValueError, match="more than once"):
        npoptim.Adam([p, p])
    with pytest.raises(ValueError, match="more than once"):
        npoptim.Adam([{"params": [p[:2]]}, {"params": [p[1:]]}])
    npoptim.Adam([p[:2], p[2:]])  # disjoint views of one buffer are fine


@pytest.mark.parametrize("name,kw,match", [
    ("Adam", dict(lr=-1.0), "Invalid learning rate"),
    ("Adam", dict(lr=float("nan")), "Invalid learning rate"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon"),
    ("Adam", dict(betas=(1.0, 0.9)), "beta parameter at index 0"),
    ("Adam", dict(betas=(0.9, -0.1)), "beta parameter at index 1"),
    ("Adam", dict(betas=0.9), "pair"),
    ("Adam", dict(weight_decay=-1), "weight_decay"),
    ("AdamW", dict(lr=-1.0), "Invalid learning rate"),
    ("SparseAdam", dict(betas=(0.9, 1.5)), "beta parameter at index 1"),
    ("Adagrad", dict(lr_decay=-0.1), "lr_decay"),
    ("Adagrad", dict(initial_accumulator_value=-1), "initial_accumulator_value"),
    ("Adadelta", dict(rho=1.5), "rho"),
    ("Adam", dict(differentiable=True), "autograd"),
    # a value of the wrong type is named as such (not "Invalid learning rate: 1e-3")
    ("Adam", dict(lr="1e-3"), "Invalid learning rate: '1e-3' is a str, not a real number"),
    ("SGD", dict(lr=0.1, momentum=True), "Invalid momentum value: True is a bool, not a real"),
    ("Adam", dict(betas=("0.9", 0.99)), "index 0: '0.9' is a str, not a real number"),
    ("Adam", dict(betas=(0.9, None)), "index 1: None is a NoneType, not a real number"),
])
def test_invalid_hyperparameters_raise(name, kw, match):
    with pytest.raises(ValueError, match=match):
        getattr(npoptim, name)([np.zeros(3)], **kw)


def test_group_overrides_are_validated_and_extra_keys_kept_as_torch():
    with pytest.raises(ValueError, match="learning rate"):
        npoptim.Adam([{"params": [np.zeros(2)], "lr": -3}])
    # torch keeps keys it does not know (schedulers add initial_lr; users add names)
    opt = npoptim.Adam([{"params": [np.zeros(2)], "name": "bias"}])
    assert opt.param_groups[0]["name"] == "bias"
    with pytest.raises(TypeError, match="ordered"):
        npoptim.Adam([{"params": {1}}])


# --------------------------------------------------------------------------- step errors
def _csr(shape, indptr, indices, data):
    m = scipy.sparse.csr_array((np.ones(1), np.zeros(1, np.int32), np.array([0, 1] + [1] * (shape[0] - 1))), shape=shape)
    m.indptr, m.indices, m.data = (np.asarray(indptr, np.int32), np.asarray(indices, np.int32),
                                   np.asarray(data))
    return m


BAD_STEPS = {
    "too few grads": (lambda opt: good_grads(opt)[:2], ValueError, "3 parameters"),
    "too many grads": (lambda opt: good_grads(opt) + [None], ValueError, "3 parameters"),
    "wrong shape": (lambda opt: good_grads(opt)[:2] + [np.ones((2, 4))], ValueError, "shape"),
    "wrong dtype": (lambda opt: good_grads(opt)[:2] + [np.ones((2, 2, 2), np.float32)],
                    ValueError, "dtype"),
    "integer grad": (lambda opt: good_grads(opt)[:2] + [np.ones((2, 2, 2), np.int64)],
                     ValueError, "dtype"),
    "complex grad": (lambda opt: good_grads(opt)[:2] + [np.ones((2, 2, 2), complex)],
                     ValueError, "dtype"),
    "list grad": (lambda opt: good_grads(opt)[:2] + [[1.0] * 8], TypeError, "NumPy array"),
    "grads missing": (lambda opt: None, TypeError, "needs grads"),
}


@pytest.mark.parametrize("case", sorted(BAD_STEPS))
@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adagrad", "Adadelta"])
def test_bad_grads_raise_and_change_nothing(name, case):
    make, error, match = BAD_STEPS[case]
    opt = stepped(name)
    snap = snapshot(opt)
    with pytest.raises(error, match=match):
        opt.step(make(opt))
    assert_unchanged(opt, snap)


def test_csr_to_dense_only_optimizer_says_which():
    opt = stepped("Adam")
    snap = snapshot(opt)
    grads = good_grads(opt)
    grads[0] = scipy.sparse.csr_array(np.ones((6, 3)))
    with pytest.raises(TypeError, match="Adam does not accept sparse"):
        opt.step(grads)
    assert_unchanged(opt, snap)


def test_other_sparse_formats_are_refused():
    opt = stepped("SparseAdam")
    snap = snapshot(opt)
    grads = [scipy.sparse.coo_array(np.ones((6, 3))), None, None]
    with pytest.raises(TypeError, match="tocsr"):
        opt.step(grads)
    assert_unchanged(opt, snap)


def test_one_sparse_gradient_of_another_format_is_refused_by_name():
    """A single scipy.sparse gradient of a non-CSR format, passed without a list, is one
    gradient (refused as not CSR), not a sequence of its rows ("got 6 gradients")."""
    w = np.zeros((6, 3))
    opt = npoptim.SparseAdam([w], lr=0.1)
    with pytest.raises(TypeError, match="grads\\[0\\]: expected a scipy.sparse CSR gradient, "
                       "got 'coo'; convert it with .tocsr()"):
        opt.step(scipy.sparse.coo_array(np.ones((6, 3))))
    assert not w.any() and not opt.state
    opt.step(scipy.sparse.csr_array(np.ones((6, 3))))
    assert (w != 0).all()


BAD_CSR = {
    "wrong shape": (scipy.sparse.csr_array(np.ones((5, 3))), "shape"),
    "negative column": (_csr((6, 3), [0, 1, 1, 1, 1, 1, 1], [-1], [1.0]), "out of range"),
    "column too large": (_csr((6, 3), [0, 1, 1, 1, 1, 1, 1], [3], [1.0]), "out of range"),
    "huge column": (_csr((6, 3), [0, 1, 1, 1, 1, 1, 1], [2**31 - 1], [1.0]), "out of range"),
    "indptr not from 0": (_csr((6, 3), [1, 1, 1, 1, 1, 1, 1], [0], [1.0]), "indptr\\[0\\]"),
    "indptr decreasing": (_csr((6, 3), [0, 1, 0, 1, 1, 1, 1], [0], [1.0]), "decreases"),
    "indptr past end": (_csr((6, 3), [0, 1, 1, 1, 1, 1, 5], [0], [1.0]), "past"),
    "indptr too short": (_csr((6, 3), [0, 1, 1], [0], [1.0]), "entries"),
    "data dtype": (_csr((6, 3), [0, 1, 1, 1, 1, 1, 1], [0], np.ones(1, np.float32)), "dtype"),
    "data short": (_csr((6, 3), [0, 2, 2, 2, 2, 2, 2], [0, 1], np.ones(1)), "past"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSR))
@pytest.mark.parametrize("name", ["SparseAdam", "Adagrad"])
def test_malformed_csr_raises_before_any_write(name, case):
    bad, match = BAD_CSR[case]
    rng = np.random.default_rng(1)
    params = [rng.standard_normal((5, 2)), rng.standard_normal((6, 3))]
    opt = getattr(npoptim, name)(params)
    for _ in range(2):
        opt.step([rng.standard_normal((5, 2)), rng.standard_normal((6, 3))])
    snap = snapshot(opt)
    # the bad gradient comes last: the first param's valid gradient must not be applied
    with pytest.raises(ValueError, match=match):
        opt.step([scipy.sparse.csr_array(np.ones((5, 2))), bad])
    assert_unchanged(opt, snap)


def test_read_only_or_invalid_group_at_step_time_changes_nothing():
    opt = stepped("Adam")
    snap = snapshot(opt)
    opt.params[2].flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        opt.step(good_grads(opt))
    opt.params[2].flags.writeable = True
    assert_unchanged(opt, snap)
    opt.param_groups[0]["lr"] = -1.0
    with pytest.raises(ValueError, match="param group 0: Invalid learning rate"):
        opt.step(good_grads(opt))
    opt.param_groups[0]["lr"] = snap[2][0]["lr"]
    assert_unchanged(opt, snap)


def test_adagrad_weight_decay_with_csr_is_refused():
    opt = stepped("Adagrad", weight_decay=0.1)
    snap = snapshot(opt)
    with pytest.raises(ValueError, match="weight_decay option is not compatible"):
        opt.step([np.ones((6, 3)), np.ones(4), scipy.sparse.csr_array(np.ones((2, 4)))])
    assert_unchanged(opt, snap)


# ----------------------------------------------------------------------- views and groups
def test_views_and_non_contiguous_params_are_updated_in_place():
    model = np.arange(24, dtype=np.float64).reshape(4, 6)
    strided, transposed = model[:, ::2], np.ones((3, 5)).T
    opt = npoptim.Adam([strided, transposed], lr=0.1)
    before = model.copy()
    opt.step([np.ones(strided.shape), np.ones(transposed.shape)])
    np.testing.assert_allclose(model[:, ::2], before[:, ::2] - 0.1)
    np.testing.assert_array_equal(model[:, 1::2], before[:, 1::2])
    np.testing.assert_allclose(transposed, 0.9)


def test_none_grads_leave_param_and_state_alone_and_groups_use_overrides():
    a, b = np.zeros(3), np.zeros(3)
    opt = npoptim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    opt.step([np.ones(3), None])
    assert 1 not in opt.state and np.all(b == 0)
    opt.step([None, np.ones(3)])
    np.testing.assert_allclose(a, -0.1)
    np.testing.assert_allclose(b, -0.5)
    assert opt.state[0]["step"] == 1 and opt.state[1]["step"] == 1


def test_closure_returns_loss_and_grads():
    p = np.ones(2)
    opt = npoptim.Adam([p], lr=0.1)
    loss = opt.step(closure=lambda: (float(p @ p), [2 * p]))
    assert loss == 2.0 and np.all(p < 1)


def test_closure_first_and_positional_as_torch_and_one_signature_with_lbfgs():
    import inspect

    from npoptim.optim.optimizer import Optimizer
    p, q = np.ones(2), np.ones(2)
    closure = lambda: (float(p @ p), [2 * p])  # noqa: E731
    assert npoptim.Adam([p], lr=0.1).step(closure) == 2.0
    npoptim.Adam([q], lr=0.1).step(closure=lambda: (float(q @ q), [2 * q]))
    np.testing.assert_array_equal(p, q)
    with pytest.raises(TypeError, match="not both"):
        npoptim.Adam([p]).step([2 * p], closure=closure)
    with pytest.raises(TypeError, match="two closures"):
        npoptim.Adam([p]).step(closure, closure=closure)
    assert (inspect.signature(npoptim.LBFGS.step) == inspect.signature(npoptim.Adam.step)
            == inspect.signature(Optimizer.step))
    r = np.ones(2)
    assert npoptim.LBFGS([r], max_iter=2).step(lambda: (float(r @ r), [2 * r])) == 2.0


# ------------------------------------------------------------------------------ state_dict
def test_state_dict_round_trip_continues_bit_identically():
    rng = np.random.default_rng(5)
    grads = [[rng.standard_normal(s) for s in [(6, 3), (4,), (2, 2, 2)]] for _ in range(4)]
    a = stepped("Adam", amsgrad=True)
    b_params = [p.copy() for p in a.params]
    b = npoptim.Adam(b_params, lr=0.5)
    b.load_state_dict(a.state_dict())
    for g in grads:
        a.step(g)
        b.step(g)
    for p, q in zip(a.params, b.params):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("mutate,match", [
    (lambda sd: sd["param_groups"].append(dict(sd["param_groups"][0])), "number of parameter"),
    (lambda sd: sd["param_groups"][0]["params"].pop(), "doesn't match the size"),
    (lambda sd: sd["state"][0].__setitem__("exp_avg", np.zeros((3, 6))), "shape"),
    (lambda sd: sd["state"][1].pop("exp_avg_sq"), "expects"),
    (lambda sd: sd["state"][2].__setitem__("step", -1), "non-negative whole"),
    (lambda sd: sd["state"][2].__setitem__("step", 1.5), "non-negative whole"),
    (lambda sd: sd["state"][2].__setitem__("exp_avg", np.zeros((2, 2, 2), complex)), "real"),
    (lambda sd: sd["param_groups"][0].__setitem__("lr", -1), "learning rate"),
    (lambda sd: sd["state"].__setitem__(7, {}), "no param group"),
    (lambda sd: sd.pop("state"), "exactly the keys"),
])
def test_bad_state_dict_raises_and_changes_nothing(mutate, match):
    opt = stepped("Adam")
    snap = snapshot(opt)
    sd = opt.state_dict()
    mutate(sd)
    with pytest.raises(ValueError, match=match):
        opt.load_state_dict(sd)
    assert_unchanged(opt, snap)


def test_state_dict_has_torch_layout():
    opt = stepped("Adam")
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1, 2]
    assert sd["state"][0]["step"].dtype == np.float32 and sd["state"][0]["step"] == 2
    assert sd["state"][0]["exp_avg"].shape == (6, 3)
    assert {"foreach", "fused", "capturable", "differentiable",
            "decoupled_weight_decay"} <= set(sd["param_groups"][0])
    sparse = stepped("Adagrad")
    assert set(sparse.state_dict()["state"][0]) == {"step", "sum"}


# ------------------------------------------------------------------- non-finite gradients
def test_nonfinite_gradients_propagate_by_default_as_torch():
    p = np.ones(3)
    npoptim.Adam([p]).step([np.array([1.0, np.nan, 1.0])])
    assert np.isnan(p[1]) and np.isfinite(p[0])


@pytest.mark.parametrize("name", ["Adam", "SparseAdam", "Adagrad"])
def test_nonfinite_raise_names_the_position_and_changes_nothing(name):
    opt = stepped(name)
    opt.nonfinite = "raise"
    snap = snapshot(opt)
    grads = [np.ones((6, 3)), np.ones(4), np.ones((2, 2, 2))]
    grads[2][1, 0, 1] = np.inf
    position = "row 1, column 1" if name == "SparseAdam" else r"index \(1, 0, 1\)"
    with pytest.raises(FloatingPointError, match=r"grads\[2\].*" + position):
        opt.step(grads)
    assert_unchanged(opt, snap)
    if name != "Adam":
        bad = scipy.sparse.csr_array(np.ones((6, 3)))
        bad.data[4] = np.nan
        with pytest.raises(FloatingPointError, match="row 1, column 1"):
            opt.step([bad, None, None])
        assert_unchanged(opt, snap)


def test_nonfinite_skip_leaves_the_step_out_and_counts_it():
    opt = stepped("Adam")
    opt.nonfinite = "skip"
    snap = snapshot(opt)
    opt.step([np.full((6, 3), np.nan), np.ones(4), np.ones((2, 2, 2))])
    assert_unchanged(opt, snap)
    assert opt.skipped_steps == 1
    opt.step(good_grads(opt))
    assert opt.state[0]["step"] == 3
    with pytest.raises(ValueError, match="nonfinite must be"):
        opt.nonfinite = "ignore"


def test_sparse_adam_refuses_a_0d_parameter_before_anything_changes():
    p = np.array(1.0, np.float32)
    opt = npoptim.SparseAdam([p])
    with pytest.raises(ValueError, match="0-d parameter"):
        opt.step([np.array(0.5, np.float32)])
    assert p == 1.0 and opt.state == {}


# ------------------------------------------------------------ found by the review of the core
def test_fortran_ordered_state_loads_and_keeps_updating():
    """torch gives a transposed param's state its own (Fortran) order; kernels need C order."""
    def run(order):
        a = npoptim.Adam([np.zeros((3, 4))], lr=0.1)
        a.step([np.ones((3, 4))])
        sd = a.state_dict()
        for k in ("exp_avg", "exp_avg_sq"):
            sd["state"][0][k] = np.asarray(sd["state"][0][k], order=order)
        b = npoptim.Adam([np.zeros((3, 4))], lr=0.1)
        b.load_state_dict(sd)
        for _ in range(3):
            b.step([np.ones((3, 4))])
        return b.state[0]["exp_avg"].copy(), b.params[0].copy()
    (m_c, p_c), (m_f, p_f) = run("C"), run("F")
    np.testing.assert_array_equal(m_f, m_c)
    np.testing.assert_array_equal(p_f, p_c)
    assert m_c[0, 0] == pytest.approx(1 - 0.9 ** 4)


def test_state_that_no_longer_fits_the_options_raises_before_any_write():
    opt = stepped("Adam")
    snap = snapshot(opt)
    opt.param_groups[0]["amsgrad"] = True
    with pytest.raises(ValueError, match="has no 'max_exp_avg_sq'"):
        opt.step(good_grads(opt))
    opt.param_groups[0]["amsgrad"] = False
    assert_unchanged(opt, snap)
    opt.state[2]["exp_avg"] = np.asfortranarray(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match=r"state\[2\]\['exp_avg'\] must be a C-contiguous"):
        opt.step(good_grads(opt))
    np.testing.assert_array_equal(opt.params[0], snap[0][0])


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_array_subclasses_as_params_are_refused_and_as_grads_accepted():
    with pytest.raises(TypeError, match="np.matrix"):
        npoptim.Adam([np.zeros(2), np.matrix(np.zeros((2, 2)))])
    p = np.zeros((2, 2))
    npoptim.Adam([p], lr=0.1).step([np.matrix(np.ones((2, 2)))])
    np.testing.assert_allclose(p, -0.1)


def test_huge_integer_hyperparameter_is_refused():
    with pytest.raises(ValueError, match="learning rate"):
        npoptim.Adam([np.zeros(2)], lr=10 ** 400)


def test_amsgrad_max_propagates_nan_as_torch_maximum():
    p = np.zeros(2)
    opt = npoptim.Adam([p], amsgrad=True)
    opt.step([np.array([1.0, 1.0])])
    opt.step([np.array([np.nan, 1.0])])
    assert np.isnan(opt.state[0]["max_exp_avg_sq"][0])
    assert np.isfinite(opt.state[0]["max_exp_avg_sq"][1])


def test_sparse_adam_refuses_zero_lr_and_eps_as_torch():
    for kw, match in ((dict(lr=0.0), "learning rate"), (dict(eps=0.0), "epsilon")):
        with pytest.raises(ValueError, match=match):
            npoptim.SparseAdam([np.zeros((2, 2))], **kw)


def test_adamw_stays_decoupled_after_loading_an_adam_state_dict():
    adam = npoptim.Adam([np.zeros(3)], weight_decay=0.1)
    adamw = npoptim.AdamW([np.zeros(3)])
    adamw.load_state_dict(adam.state_dict())
    assert adamw.param_groups[0]["decoupled_weight_decay"] is True


def test_adagrad_group_added_later_starts_from_the_constructors_accumulator():
    a, b = np.zeros(2), np.zeros(2)
    opt = npoptim.Adagrad([a], lr=0.1)
    opt.add_param_group({"params": [b], "initial_accumulator_value": 5.0})
    opt.step([np.ones(2), np.ones(2)])
    np.testing.assert_array_equal(opt.state[1]["sum"], 1.0)  # torch: 1.0 (0 + 1), not 6.0
    np.testing.assert_allclose(b, -0.1)


def test_embedding_row_grad_with_no_lookups():
    g = npoptim.embedding_row_grad([], np.zeros((0, 4), np.float32), 10)
    assert g.shape == (10, 4) and g.nnz == 0
    p = np.ones((10, 4), np.float32)
    opt = npoptim.SparseAdam([p])
    opt.step([g])
    assert opt.state[0]["step"] == 1 and np.all(p == 1)
