"""Low precision as GPU kernels run it (the README's table): bfloat16/float16 optimizers with
torch's per-op and fused rounding, stochastic rounding, Kahan compensation, master weights and
loss scaling; :mod:`npoptim.precision.formats` has the 16-bit conversions."""
from npoptim.precision.adadelta import Adadelta, Adamax
from npoptim.precision.adagrad import Adagrad
from npoptim.precision.adam import Adam, AdamW
from npoptim.precision.kahan import KahanAdamW, KahanLion, KahanSGD
from npoptim.precision.master import MasterWeights
from npoptim.precision.rmsprop import RMSprop
from npoptim.precision.scaler import GradScaler
from npoptim.precision.sgd import SGD

__all__ = ["Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax", "Adadelta", "KahanAdamW",
           "KahanSGD", "KahanLion", "MasterWeights", "GradScaler"]
