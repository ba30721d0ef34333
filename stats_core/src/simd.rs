//! Runtime CPU dispatch: a hot function is compiled twice, for the baseline target and with AVX2, and the
//! AVX2 copy runs when the CPU has it. The wheel stays portable (no `-C target-cpu=native`) yet the
//! inner loops use 256-bit vectors. Both copies do the same operations in the same order (no FMA
//! contraction), so results are bitwise identical on either path.

/// Defines `$name` calling `$body` (an `#[inline(always)]` fn) through an AVX2-compiled wrapper when available.
#[macro_export]
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:path) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { $body($($arg),*) }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
