"""Neural-network operators: softmax, normalizations and pooling."""

from .norm import batch_norm, instance_norm, layer_norm, lrn, rms_norm
from .pool import avg_pool2d, global_avg_pool, global_max_pool, max_pool2d
from .softmax import log_softmax, softmax
