// nuvec: the whole public API.
#pragma once

#include "nuvec/allocator.h"
#include "nuvec/array.h"
#include "nuvec/device.h"
#include "nuvec/dtype.h"
#include "nuvec/event.h"
#include "nuvec/fft.h"
#include "nuvec/io.h"
#include "nuvec/linalg.h"
#include "nuvec/memory.h"
#include "nuvec/ops.h"
#include "nuvec/primitives.h"
#include "nuvec/random.h"
#include "nuvec/stream.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"
