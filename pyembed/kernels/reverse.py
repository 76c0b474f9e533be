"""Reverse (output-centric) operators in one place: SPEC section 2.

Every input element is read once and combined at once into every output it
reaches; outputs leave as soon as no later input can reach them, so only the
rows in flight are ever held. This module only re-exports:

    pooling (pyembed.kernels.pooling):   max_pool2d, avg_pool2d, sum_pool2d, pool2d,
                                 PoolStream, pool_output_shape, output_size
    convolution (pyembed.kernels.conv):  conv2d, depthwise_conv2d, Conv2dStream,
                                 DepthwiseConv2dStream, buffer_size
    fusion (pyembed.kernels.conv):       conv_pool2d (convolution -> pooling without
                                 the convolution output; Table I strategies)
"""
from pyembed.kernels.conv import (Conv2dStream, DepthwiseConv2dStream, buffer_size as conv_buffer_size,
                          conv2d, conv_pool2d, depthwise_conv2d)
from pyembed.kernels.pooling import (PoolStream, avg_pool2d, max_pool2d, output_size, pool2d,
                             pool_output_shape, sum_pool2d)

__all__ = ["conv2d", "depthwise_conv2d", "Conv2dStream", "DepthwiseConv2dStream",
           "conv_buffer_size", "conv_pool2d", "max_pool2d", "avg_pool2d", "sum_pool2d", "pool2d",
           "PoolStream", "pool_output_shape", "output_size"]
