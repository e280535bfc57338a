// gpt2_train_main.cpp — the gpt2-train executable: a thin main over gpt2_train (trainer/train/).
#include "train/trainer.h"

int main(int argc, char** argv) { return gpt2::run_gpt2_train(argc, argv); }
