//! llama.cpp as the reference, in the test process: the model, contexts in its default and
//! its most precise CPU configuration, a one-batch prefill, its greedy continuation and its
//! teacher-forced logits, and a prompt longer than Gemma 3's 512-token sliding window. Used
//! by the candle and MLX backends' parity tests and candle's examples/logit_profile.rs.

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lx_engine::backend::{choose_greedy, TokenId};
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::OnceLock;

use crate::models::model_path;

pub fn long_prompt() -> String {
    // Our own text, long enough (> 512 tokens) that the local layers' window matters.
    let paragraphs = [
        "The river town of Alderbrook grew up around a mill that ground wheat for three valleys. In spring the water \
         ran high and brown, and the miller's children counted the logs that floated past the wheel. Traders came \
         from the coast with salt, dyed cloth and iron tools, and left with flour, wool and honey.",
        "When the railway arrived, the old mill lost most of its trade. A new station was built on the hill above \
         the square, and for a few years the town was crowded with engineers, surveyors and labourers who slept in \
         tents along the embankment. Some of them stayed, married local women and opened shops.",
        "By the turn of the century Alderbrook had a school, two churches, a library donated by a wealthy widow and \
         a brass band that played every Sunday in the park. The library kept a ledger of every book borrowed, and \
         historians still read it to learn what farmers, clerks and schoolteachers liked to read.",
        "The winters were hard. In the great frost of 1895 the river froze from bank to bank, and people walked \
         across the ice to the market on the far side. Bakers sold hot bread from carts, children skated between \
         the boats that were trapped in the ice, and an old soldier charged a penny to cross his cleared path.",
        "During the war the station became a depot for horses and grain. Women ran the post office, the telegraph \
         and the mill, which had been repaired to grind oats for the army. Letters from the front were read aloud \
         in the square, and the names of the fallen were later carved on a stone beside the bridge.",
        "After the war the town changed slowly. Electric light reached the main street first, then the farms. A \
         cinema opened in the old corn exchange, and on Saturday nights young people came from the villages on \
         bicycles to watch films about cowboys, detectives and explorers in distant jungles.",
        "Today the mill is a museum. Visitors can watch the wheel turn, grind a handful of wheat between the stones \
         and buy a bag of flour in the shop. The guide, a retired teacher who grew up in the miller's house, tells \
         every group the same story about the winter when the river froze.",
        "The guide also likes to talk about the flood of 1911. After a week of rain the river rose above the \
         bridge, carried away a row of wooden sheds and filled the cellars of the inn with mud. The landlord \
         rescued his barrels by floating them up the stairs, and for years afterwards he served what he called \
         flood ale, which his customers swore tasted of river water.",
        "Schoolchildren who visit the museum are given a worksheet with questions about the machines. How many \
         teeth does the great gear have? Why was the wheel painted red? Who paid for the new roof in 1932? The \
         answers are hidden on labels around the building, and the first class to find them all wins a cake.",
        "On summer evenings the old square fills with people again. Musicians play under the lime trees, the \
         café puts tables on the cobbles, and the oldest residents sit on the bench by the bridge, arguing about \
         whose grandfather built the station and whose grandmother ran the telegraph office during the war. \
         Nobody remembers exactly, but everybody agrees that the best bread in the valley was baked",
    ];
    paragraphs.join("\n\n")
}

pub struct Llama {
    pub backend: &'static LlamaBackend,
    pub model: &'static LlamaModel,
}

/// llama.cpp may be initialised once per process: every model in a test binary shares it.
fn llama_backend() -> &'static LlamaBackend {
    static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();
    BACKEND.get_or_init(|| {
        let mut backend = LlamaBackend::init().expect("llama backend");
        backend.void_logs();
        backend
    })
}

/// llama.cpp with the default model.
pub fn llama() -> Llama {
    llama_at(&model_path())
}

/// llama.cpp with the model at `path`.
pub fn llama_at(path: &Path) -> Llama {
    let backend = llama_backend();
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .unwrap_or_else(|e| panic!("llama.cpp cannot load {}: {e}", path.display()));
    Llama {
        backend,
        model: Box::leak(Box::new(model)),
    }
}

/// A llama.cpp context for one sequence of up to `n_ctx` tokens, all of them in one batch,
/// on 2 threads. `precise`: without flash attention and with an f32 KV cache (llama.cpp's
/// most precise CPU configuration) rather than its defaults.
pub fn llama_context(l: &Llama, n_ctx: usize, precise: bool) -> LlamaContext<'static> {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx as u32))
        .with_n_batch(n_ctx as u32)
        .with_n_ubatch(512)
        .with_n_threads(2)
        .with_n_threads_batch(2);
    let params = if precise {
        params
            .with_flash_attention_policy(0)
            .with_type_k(KvCacheType::F32)
            .with_type_v(KvCacheType::F32)
    } else {
        params
    };
    l.model
        .new_context(l.backend, params)
        .expect("llama context")
}

/// Decode `tokens` from position 0 as one batch (of room for `capacity`), with logits for
/// the positions `logits_at` picks; the batch is returned for further steps.
pub fn prefill(
    ctx: &mut LlamaContext<'static>,
    tokens: &[LlamaToken],
    capacity: usize,
    logits_at: impl Fn(usize) -> bool,
) -> LlamaBatch<'static> {
    let mut batch = LlamaBatch::new(capacity, 1);
    for (i, &t) in tokens.iter().enumerate() {
        batch.add(t, i as i32, &[0], logits_at(i)).unwrap();
    }
    ctx.decode(&mut batch).expect("decode prompt");
    batch
}

/// Tokenizes `text` with BOS and greedily continues it `n` tokens, one token per decode, in
/// llama.cpp's default configuration: the prompt, the continuation, and llama.cpp's own top-2
/// gap at each continuation position.
pub fn greedy(l: &Llama, text: &str, n: usize) -> (Vec<TokenId>, Vec<TokenId>, Vec<f32>) {
    let prompt: Vec<LlamaToken> = l.model.vocab().tokenize(text.as_bytes(), true, false);
    let n_ctx = prompt.len() + n + 8;
    let mut ctx = llama_context(l, n_ctx, false);
    let mut batch = prefill(&mut ctx, &prompt, n_ctx, |i| i + 1 == prompt.len());
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    let mut last_row = batch.n_tokens() - 1;
    for i in 0..n {
        let c = choose_greedy(ctx.get_logits_ith(last_row), 2);
        gaps.push(c.top[0].logprob - c.top[1].logprob);
        out.push(c.token);
        if i + 1 == n {
            break;
        }
        batch.clear();
        batch.add(LlamaToken(c.token as i32), (prompt.len() + i) as i32, &[0], true).unwrap();
        ctx.decode(&mut batch).expect("decode");
        last_row = 0;
    }
    (prompt.iter().map(|t| t.0 as TokenId).collect(), out, gaps)
}

/// llama.cpp's logits at every continuation position of `prompt + cont`, in one batch in its
/// precise configuration: the teacher forcing the backend under test gets, so llama.cpp's
/// agreement with its own greedy stream sets the bar on this machine.
pub fn forced(l: &Llama, prompt: &[TokenId], cont: &[TokenId]) -> Vec<Vec<f32>> {
    let seq: Vec<LlamaToken> = prompt.iter().chain(&cont[..cont.len() - 1]).map(|&t| LlamaToken(t as i32)).collect();
    let n = seq.len();
    let mut ctx = llama_context(l, n + 8, true);
    prefill(&mut ctx, &seq, n, |i| i + 1 >= prompt.len());
    (0..cont.len()).map(|i| ctx.get_logits_ith((prompt.len() - 1 + i) as i32).to_vec()).collect()
}
