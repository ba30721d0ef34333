"""Type stub of the compiled module; kept in step with stats_core/src/lib.rs."""

import numpy as np
import numpy.typing as npt

__version__: str
build_profile: str

def kendall_tau_b_rows(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...
