#include "models/serving/transformer_cost.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

TEST(ModelCatalog, Llama2ShapesAndParameterCounts) {
  const auto c = fixtures::llama2();
  const auto& m7 = c.get("llama-2-7b", "");
  EXPECT_EQ(m7.layers, 32);
  EXPECT_EQ(m7.kv_dim(), 4096);
  // Llama 2 paper, Table 1 quotes 7B / 13B / 70B; the exact counts follow from the shapes:
  // 7B: 32 * (4096*(4096+8192) + 4096*4096 + 3*4096*11008 + 2*4096) + 2*32000*4096 + 4096.
  EXPECT_EQ(m7.params(), 6'738'415'616);
  EXPECT_EQ(c.get("llama-2-13b", "").params(), 13'015'864'320);
  const auto& m70 = c.get("llama-2-70b", "");
  EXPECT_EQ(m70.kv_dim(), 1024);  // grouped-query attention: 8 KV heads of 128
  EXPECT_EQ(m70.params(), 68'976'648'192);
  EXPECT_EQ(m70.kv_bytes_per_token_layer(), 2 * 1024 * 2);
  EXPECT_THROW(c.get("llama-3", "system.model"), InputError);
}

TEST(ModelCatalog, RejectsInconsistentShapes) {
  nlohmann::json j = {{"_source", "x"}, {"layers", 2}, {"hidden", 100}, {"heads", 3},
                      {"kv_heads", 3},  {"ffn", 10},   {"vocab", 10}};
  JsonReader r(j, "models.bad");
  EXPECT_THROW(parse_transformer_shape(r, "bad"), InputError);
}

// One decode step of Llama-2-7B for a single request whose KV holds n = 99 tokens (the new
// token makes 100), tensor-parallel degree 1, fp16 (2 bytes). Computed by hand per layer:
//   QKV   : 2*1*4096*12288            = 100,663,296 FLOPs; bytes 2*(4096 + 4096*12288 + 12288)
//   O     : 2*1*4096*4096             =  33,554,432;        bytes 2*(4096 + 4096*4096 + 4096)
//   up    : 2*1*4096*22016            = 180,355,072;        bytes 2*(4096 + 4096*22016 + 22016)
//   down  : 2*1*11008*4096            =  90,177,536;        bytes 2*(11008 + 11008*4096 + 4096)
//   norms : 2 * 4*4096                =      32,768;        bytes 2 * 2*(2*4096 + 4096)
//   rope  : 6*8192                    =      49,152;        bytes 2*2*8192
//   act   : 5*11008                   =      55,040;        bytes 2*3*11008
//   adds  : 2 * 4096                  =       8,192;        bytes 2 * 2*3*4096
//   attn  : 4 * 100 keys * 4096       =   1,638,400;        bytes 2*(2*100*4096 + 2*4096 + 2*4096)
TEST(TransformerCost, Llama2_7bDecodeStepByHand) {
  const auto m = fixtures::llama2().get("llama-2-7b", "");
  AttentionLoad a;
  a.add_decode(100);
  const OpWork layer = layer_work(m, 1, a, 1);
  const double flops = 100'663'296.0 + 33'554'432 + 180'355'072 + 90'177'536 + 32'768 + 49'152 +
                       55'040 + 8'192 + 1'638'400;
  const double bytes = 2.0 * (4096 + 4096.0 * 12288 + 12288) + 2.0 * (4096 + 4096.0 * 4096 + 4096) +
                       2.0 * (4096 + 4096.0 * 22016 + 22016) +
                       2.0 * (11008 + 11008.0 * 4096 + 4096) + 2 * 2.0 * (2 * 4096 + 4096) +
                       2.0 * 2 * 8192 + 2.0 * 3 * 11008 + 2 * 2.0 * 3 * 4096 +
                       2.0 * (2 * 100 * 4096 + 2 * 4096 + 2 * 4096);
  EXPECT_DOUBLE_EQ(layer.flops, flops);
  EXPECT_DOUBLE_EQ(layer.bytes, bytes);
  // Whole step: 32 layers, embedding of 1 token, final norm, LM head of 32000 columns.
  const OpWork head = token_op_work(Op::kLmHead, m, 1, 1);
  EXPECT_DOUBLE_EQ(head.flops, 2.0 * 4096 * 32000);
  EXPECT_DOUBLE_EQ(head.bytes, 2.0 * (4096 + 4096.0 * 32000 + 32000));
  // Sanity of the totals: a decode step reads every weight once (~13.5 GB) and does ~2 FLOPs per
  // parameter.
  const double total_bytes = 32 * layer.bytes + head.bytes +
                             token_op_work(Op::kEmbedding, m, 1, 1).bytes +
                             token_op_work(Op::kFinalNorm, m, 1, 1).bytes;
  EXPECT_NEAR(total_bytes / static_cast<double>(m.weight_bytes()), 1.0, 0.02);
  const double total_flops = 32 * layer.flops + head.flops;
  EXPECT_NEAR(total_flops / (2.0 * static_cast<double>(m.params())), 1.0, 0.03);
}

TEST(TransformerCost, TensorParallelSplitsShardedOperatorsOnly) {
  const auto m = fixtures::llama2().get("llama-2-70b", "");
  for (Op op : {Op::kQkvProj, Op::kOutProj, Op::kMlpUpGate, Op::kMlpDown, Op::kMlpAct, Op::kRope})
    EXPECT_DOUBLE_EQ(token_op_work(op, m, 64, 8).flops * 8, token_op_work(op, m, 64, 1).flops)
        << op_name(op);
  for (Op op : {Op::kInputNorm, Op::kResidualAdd, Op::kEmbedding})
    EXPECT_DOUBLE_EQ(token_op_work(op, m, 64, 8).bytes, token_op_work(op, m, 64, 1).bytes)
        << op_name(op);
}

TEST(TransformerCost, PrefillChunkPairsAreCausal) {
  AttentionLoad a;
  a.add_prefill_chunk(0, 4);  // 1+2+3+4
  EXPECT_EQ(a.prefill_pairs, 10);
  a.add_prefill_chunk(4, 2);  // 2*4 + 1+2
  EXPECT_EQ(a.prefill_pairs, 10 + 11);
  EXPECT_EQ(a.prefill_kv_read, 4 + 6);
}

// The length the prefill attention kernel is priced at: the chunks' FLOP-weighted geometric mean
// key length. One 512-token and one 2048-token prompt: pairs 131,328 and 2,098,176, so
// log2 L = (131,328 x 9 + 2,098,176 x 11) / 2,229,504 = 10.8822 -> L = 1887.4 -> 1887. A batch of
// one length gives that length; no prefill gives 0.
// Decode attention is priced at the decoding requests' KV lengths' geometric mean weighted by
// the KV bytes each reads (its length): 1024 and 3072 -> exp((1024 ln 1024 + 3072 ln 3072) /
// 4096) = exp(7.75543) = 2334.2 -> 2334; prefill chunks do not move it, nor it theirs.
TEST(AttentionLoad, DecodeSeqLenIsTheByteWeightedGeometricMean) {
  AttentionLoad a;
  EXPECT_EQ(a.decode_seq_len(), 0);
  a.add_decode(1024);
  EXPECT_EQ(a.decode_seq_len(), 1024);
  a.add_decode(3072);
  EXPECT_EQ(a.decode_seq_len(), 2334);
  a.add_prefill_chunk(0, 512);
  EXPECT_EQ(a.decode_seq_len(), 2334);
  EXPECT_EQ(a.prefill_seq_len(), 512);
  AttentionLoad b;  // the same requests in two loads, summed
  b.add_decode(1024);
  AttentionLoad c;
  c.add_decode(3072);
  b += c;
  EXPECT_EQ(b.decode_seq_len(), 2334);
}

TEST(AttentionLoad, PrefillSeqLenIsTheFlopWeightedGeometricMean) {
  AttentionLoad a;
  EXPECT_EQ(a.prefill_seq_len(), 0);
  a.add_prefill_chunk(0, 512);
  EXPECT_EQ(a.prefill_seq_len(), 512);
  a.add_prefill_chunk(0, 512);
  EXPECT_EQ(a.prefill_seq_len(), 512);
  AttentionLoad b;
  b.add_prefill_chunk(0, 512);
  b.add_prefill_chunk(0, 2048);
  EXPECT_EQ(b.prefill_seq_len(), 1887);
  b.add_decode(100);  // decodes do not move it
  EXPECT_EQ(b.prefill_seq_len(), 1887);
}
