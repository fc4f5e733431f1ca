// Slice and Range whose bounds are computed at run time while their length
// is not (Note [Bounds at run time] in import_run_time_bounds.cpp).
#pragma once

#include "kiln/onnx/import_context.h"

namespace kiln::onnx {

// x[starts:ends] along `axis` (step 1), the bounds one-element integer
// values computed at run time: an index_select at starts + 0..L-1 where
// ends is starts + L for a constant L; null where the import cannot tell.
jit::Value* slice_at_run_time(ImportContext& c, jit::Value* x, int64_t axis, jit::Value* starts,
                              jit::Value* ends);

// Range(start, limit, delta) with bounds computed at run time, limit start
// plus a constant, delta a constant; null where the import cannot tell.
jit::Value* range_at_run_time(ImportContext& c, jit::Value* start, jit::Value* limit,
                              jit::Value* delta);

}  // namespace kiln::onnx
