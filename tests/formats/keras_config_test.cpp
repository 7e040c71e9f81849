// Code references in Keras model configs (formats/keras_config.h), on configs shaped as Keras 2 and
// Keras 3 write them: a Lambda's marshalled bytecode, a function by name, a module outside Keras,
// Keras 3's __lambda__; plain layers and Keras 3's own "module": "keras.layers" are data.
#include "formats/keras_config.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

TEST(KerasConfig, LambdaBytecodeIsNamedByItsLayer) {
  const auto found = find_keras_code("model_config",
                                     R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
           {"class_name": "Dense", "config": {"name": "dense", "units": 2}},
           {"class_name": "Lambda", "config": {"name": "scale_by_two", "function": ["4wEAAAAA\n", null, null],
                                               "function_type": "lambda", "module": "__main__"}}]}})");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].attribute, "model_config");
  EXPECT_EQ(found[0].layer, "scale_by_two");
  EXPECT_EQ(found[0].class_name, "Lambda");
  EXPECT_NE(found[0].reason.find("marshalled Python bytecode"), std::string::npos) << found[0].reason;
}

TEST(KerasConfig, FunctionsAndModulesOutsideKerasAreCode) {
  auto found = find_keras_code("model_config", R"({"class_name": "Activation", "config": {"name": "act",
      "function": "my_activation", "function_type": "function", "module": "mylib.acts"}})");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].reason.find("function_type 'function'"), std::string::npos) << found[0].reason;
  found = find_keras_code("model_config", R"({"module": "evil.layers", "class_name": "Custom",
      "config": {"name": "custom_1"}, "registered_name": "Custom"})");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].layer, "custom_1");
  EXPECT_NE(found[0].reason.find("'evil.layers'"), std::string::npos);
  found = find_keras_code("model_config", R"({"class_name": "Lambda", "config": {"name": "l",
      "function": {"class_name": "__lambda__", "config": {"code": "4wEAAAAA", "defaults": null}}}})");
  EXPECT_EQ(found.size(), 2u) << "the layer and its Keras 3 lambda";
  found = find_keras_code("training_config", "not json");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].attribute, "training_config");
}

TEST(KerasConfig, PlainKerasLayersAreData) {
  EXPECT_TRUE(find_keras_code("model_config", R"({"module": "keras", "class_name": "Sequential", "config": {
      "name": "s", "layers": [{"module": "keras.layers", "class_name": "Dense", "config": {"name": "d",
      "activation": "relu", "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
      "config": {"seed": null}}}, "registered_name": null}]}})")
                  .empty());
  EXPECT_TRUE(find_keras_code("training_config", R"({"loss": "mse", "optimizer_config": {"class_name": "Adam",
      "config": {"name": "Adam", "learning_rate": 0.001}}})")
                  .empty());
}

}  // namespace
}  // namespace ckpt
