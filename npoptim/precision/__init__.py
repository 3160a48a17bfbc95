"""Low precision as GPU kernels run it (see the README table): 16-bit formats and optimizers."""
from npoptim.precision.adam import Adam, AdamW
from npoptim.precision.kahan import KahanAdamW, KahanSGD
from npoptim.precision.master import MasterWeights
from npoptim.precision.scaler import GradScaler
from npoptim.precision.sgd import SGD

__all__ = ["Adam", "AdamW", "SGD", "KahanAdamW", "KahanSGD", "MasterWeights", "GradScaler"]
