"""Neural-network operators: softmax, normalizations and pooling."""

from .norm import batch_norm, instance_norm, layer_norm, lrn, rms_norm
from .pool import (
    avg_pool,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    global_avg_pool,
    global_max_pool,
    max_pool,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from .softmax import hardmax, log_softmax, softmax
