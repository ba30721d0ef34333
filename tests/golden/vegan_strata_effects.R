# Golden values for PERMANOVA's effect sizes within strata, computed with R vegan's adonis2.
# Usage: Rscript tests/golden/vegan_strata_effects.R tests/golden/vegan_strata_effects.json
# adonis2(d ~ strata / groups, by = "terms") splits SS_T into the strata, the groups within the strata
# (`strata:groups`) and the residual within the stratum × group cells: stats_core's within-strata R² and ω² are
# made of the last two rows. adonis2(d ~ groups, strata = strata) is recorded too: its R2 ignores the strata.
# Inputs come from integer formulas (no random numbers) and are written next to the results.
suppressPackageStartupMessages(library(vegan))

out_path <- commandArgs(trailingOnly = TRUE)[1]
num <- function(x) paste0("[", paste(sprintf("%.17g", x), collapse = ", "), "]")
str_vec <- function(x) paste0("[", paste0('"', x, '"', collapse = ", "), "]")

make_case <- function(name, x, groups, strata, method) {
  d <- vegdist(x, method = method)
  nested <- adonis2(d ~ strata / groups, by = "terms", permutations = 0)
  blocked <- adonis2(d ~ groups, strata = strata, permutations = 0)
  paste0(
    '"', name, '": {',
    '"method": "', method, '", ',
    '"distances": ', num(as.vector(d)), ', ',
    '"groups": ', str_vec(as.character(groups)), ', ',
    '"strata": ', str_vec(as.character(strata)), ', ',
    '"nested_df": ', num(nested$Df), ', ',
    '"nested_ss": ', num(nested$SumOfSqs), ', ',
    '"nested_rows": ', str_vec(rownames(nested)), ', ',
    '"blocked_F": ', sprintf("%.17g", blocked$F[1]), ', ',
    '"blocked_R2": ', sprintf("%.17g", blocked$R2[1]),
    '}'
  )
}

# Case 1: six blocks far apart (countries), two levels (3 + 3 per block) with a small shift — the design of
# vegan_golden.R's euclidean_strata case.
i1 <- 1:36
block1 <- (i1 - 1) %/% 6
level1 <- ((i1 - 1) %/% 3) %% 2
x1 <- sapply(1:4, function(j) 4 * ((block1 * (j + 2)) %% 7) + 0.35 * level1 + (((i1 * (5 * j + 3) + 7 * j * j) %% 17) / 17 - 0.5) * 2)
g1 <- factor(ifelse(level1 == 1, "warm", "cold"))
s1 <- factor(paste0("country", block1))

# Case 2: unbalanced — five strata of 4 to 8 objects, three groups; group "c" is absent from stratum 0 and
# has a single member in stratum 1; strata listed out of order.
sizes2 <- c(4, 5, 6, 7, 8)
block2 <- rep(0:4, sizes2)
within2 <- sequence(sizes2) - 1
level2 <- ifelse(block2 == 0, within2 %% 2, ifelse(block2 == 1, c(0, 0, 1, 1, 2)[within2 + 1], within2 %% 3))
order2 <- order((seq_along(block2) * 11) %% 31)
block2 <- block2[order2]
level2 <- level2[order2]
k2 <- seq_along(block2)
x2 <- sapply(1:3, function(j) 6 * ((block2 * (2 * j + 1)) %% 5) + 0.8 * (level2 == j %% 3) + ((k2 * (3 * j + 2) + j) %% 13) / 13)
g2 <- factor(c("a", "b", "c")[level2 + 1])
s2 <- factor(paste0("s", block2))

# Case 3: Bray-Curtis (non-Euclidean) on counts, four strata of 6 with different baselines, two groups.
i3 <- 1:24
block3 <- (i3 - 1) %/% 6
level3 <- (i3 - 1) %% 2
x3 <- sapply(1:5, function(j) (block3 + 1) * (j %% 3 + 1) * 3 + level3 * (j == 2) * 4 + ((i3 * (2 * j + 7) + j) %% 5))
g3 <- factor(ifelse(level3 == 1, "treated", "control"))
s3 <- factor(paste0("site", block3))

cat(
  "{", '"vegan_version": "', as.character(packageVersion("vegan")), '", ',
  make_case("balanced_euclidean", x1, g1, s1, "euclidean"), ", ",
  make_case("unbalanced_euclidean", x2, g2, s2, "euclidean"), ", ",
  make_case("braycurtis", x3, g3, s3, "bray"),
  "}\n",
  sep = "", file = out_path
)
