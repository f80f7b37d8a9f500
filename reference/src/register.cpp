#include "opconform/core/custom_op.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {

ReferenceRegistration register_reference_ops(Registry& registry, bool install_fallbacks) {
  ReferenceRegistration out;
  out.library = std::make_unique<Library>("aten", LibraryKind::DEF, std::nullopt, registry);
  Library& lib = *out.library;
  register_elementwise_unary(lib);
  register_elementwise_binary(lib);
  register_activation(lib);
  register_normalization(lib);
  register_reduction(lib);
  register_linear_algebra(lib);
  register_convolution_pooling(lib);
  register_resampling(lib);
  register_indexing(lib);
  register_shape(lib);
  register_creation(lib);
  register_sorting(lib);
  register_distance(lib);
  register_grid_sampling(lib);
  register_embedding_bag(lib);
  register_fft(lib);
  register_autocast_rules(lib);  // last: the rules name ops of every family
  if (install_fallbacks) out.fallbacks = install_builtin_fallbacks(registry);
  return out;
}

}  // namespace opconform::reference
