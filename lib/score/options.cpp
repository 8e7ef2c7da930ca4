#include "score/options.hpp"

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "rl/algorithms.hpp"

namespace braid::score {

void add_score_options(CLI::App& app, CommandOptions& o) {
  app.add_option("-o,--output", o.out_dir, "Folder for the scored shards (made if missing)")->required();
  app.add_option("--ref", o.ref, "Reference model checkpoint (LM head): adds /logprobs/ref and the KL penalty");
  app.add_option("--critic", o.critic, "Critic checkpoint (value head): adds /values (PPO)");
  app.add_option("--reward", o.reward, "Reward model checkpoint (value head at the last token)");
  app.add_option("--reward-rule", o.reward_rule,
                 "A built-in reward instead of a model: digits, chars:SET, length:N, regex:RE, or math (the "
                 "response's final answer against the prompt line's \"answer\")");
  app.add_option("--reward-cmd", o.reward_cmd,
                 "An external scorer instead of a model: a shell command started once, fed one JSON line per "
                 "sample (prompt, response, sample_id, the prompt line's extra fields), answering one number per line");
  app.add_option("--reward-cmd-dir", o.reward_cmd_dir, "Working directory of the --reward-cmd scorer (default: ours)");
  app.add_option("--reward-cmd-timeout", o.reward_cmd_timeout, "Seconds to wait for the scorer's next answer")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "Tokenizer that decodes prompts and responses for --reward-rule and "
                                             "--reward-cmd (byte or a tokenizer.json)")->capture_default_str();
  app.add_option("--algorithm", o.algorithm,
                 "How rewards become advantages: ppo (critic + GAE), grpo, dr-grpo, dapo, gspo (group advantages), "
                 "rloo (leave-one-out baseline), reinforce++ (returns-to-go), reinforce++-baseline (group mean)")
      ->check(CLI::IsMember(rl::algorithm_names()))->capture_default_str();
  app.add_option("--kl-coef", o.kl_coef,
                 "KL penalty in the rewards against --ref: per token (ppo, reinforce++), or summed over the response "
                 "and taken off its reward (group advantages). Default with --ref: ppo 0.05, rloo and reinforce++ "
                 "0.01, the others 0; without --ref 0")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kl-estimator", o.kl_estimator, "The penalty's estimate of KL from d = logp - ref_logp: k1 (d), "
                                                   "k2 (d^2/2) or k3 (exp(-d) + d - 1)")
      ->check(CLI::IsMember({"k1", "k2", "k3"}))->capture_default_str();
  app.add_flag_callback("--norm-by-std", [&o] { o.std_normalize = true; },
                        "Group-mean advantages: divide by the group's std (the default of grpo, dapo, gspo)");
  app.add_flag_callback("--no-norm-by-std", [&o] { o.std_normalize = false; },
                        "Group-mean advantages: do not (the default of dr-grpo, reinforce++-baseline)");
  app.add_option("--overlong-buffer", o.overlong_buffer,
                 "DAPO's overlong reward shaping: a response within this many tokens of the generation's "
                 "max_new_tokens loses reward linearly, --overlong-penalty at the cap (0: off; default dapo 20% of "
                 "max_new_tokens, the others off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--overlong-penalty", o.overlong_penalty, "The reward lost at max_new_tokens")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--gamma", o.gamma, "GAE discount")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--lambda", o.lambda, "GAE lambda")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--std-eps", o.std_eps, "Group advantages: (reward - group mean) / (group std + this)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--samples-per-prompt", o.samples_per_prompt,
                 "Group size of group advantages (default: samples_per_prompt of the shards' generate config)")
      ->check(CLI::PositiveNumber);
  app.add_option("--micro-tokens", o.micro_tokens, "Tokens in one forward pass of a model")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--prefix", o.prefix, "Output names: PREFIX-<index of the input>.h5")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads (0: all cores of this process)")->capture_default_str();
  app.add_option("--tp", o.tp,
                 "Under mpirun: tensor-parallel ranks per device (the models split N ways); the ranks form -np / N "
                 "devices, which take the shards as ranks do at --tp 1")
      ->check(CLI::PositiveNumber)->capture_default_str();
  backend::add_device_option(app, o.device);
  backend::add_dtype_option(app, o.dtype);
  app.add_option("--stats", o.stats, "Write timings (braid.stagestats JSON: ref_inf, critic_inf, reward_inf) here");
}

}  // namespace braid::score
