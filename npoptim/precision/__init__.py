"""Low precision as GPU kernels run it (the README's table): bfloat16/float16 optimizers with
torch's per-op and fused rounding, stochastic rounding, Kahan compensation, master weights and
loss scaling, blockwise-quantized (8-bit, 4-bit, float8) Adam state;
:mod:`npoptim.precision.formats` has the 16-bit conversions, :mod:`npoptim.precision.quantized`
the quantization maps and codecs."""
from npoptim.precision.adadelta import Adadelta
from npoptim.precision.adafactor import Adafactor
from npoptim.precision.adagrad import Adagrad
from npoptim.precision.adam import Adam, AdamW
from npoptim.precision.adamax import Adamax
from npoptim.precision.asgd import ASGD
from npoptim.precision.bnb_adam import BnbAdam8bit, BnbAdamW8bit
from npoptim.precision.kahan import KahanAdamW, KahanLion, KahanSGD
from npoptim.precision.lbfgs import LBFGS
from npoptim.precision.master import MasterWeights
from npoptim.precision.muon import Muon
from npoptim.precision.nadam import NAdam
from npoptim.precision.quantized_adam import (Adam4bit, Adam8bit, AdamFp8, AdamW4bit, AdamW8bit,
                                              AdamWFp8)
from npoptim.precision.radam import RAdam
from npoptim.precision.rmsprop import RMSprop
from npoptim.precision.rprop import Rprop
from npoptim.precision.scaler import GradScaler
from npoptim.precision.sgd import SGD
from npoptim.precision.sparse_adam import SparseAdam

__all__ = ["Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax", "Adadelta", "NAdam", "RAdam",
           "ASGD", "Rprop", "KahanAdamW",
           "KahanSGD", "KahanLion", "MasterWeights", "GradScaler",
           "AdamW8bit", "AdamW4bit", "AdamWFp8", "Adam8bit", "Adam4bit", "AdamFp8",
           "BnbAdam8bit", "BnbAdamW8bit", "SparseAdam", "Adafactor",
           "Muon", "LBFGS"]
