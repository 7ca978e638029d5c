//! The configurations a brute force evaluates: the Cartesian product of the parameters' values
//! in Kernel Tuner's order, less those the constraints or the device reject, the reference
//! first.

use kfoundry_rt::model::spec::Param;
use kfoundry_search::Config;

/// The Cartesian product of the parameters' values in declaration order, the last parameter
/// varying fastest (Kernel Tuner's and `itertools.product`'s order).
pub struct Product<'a> {
    params: &'a [Param],
    next: Option<Vec<usize>>,
}

pub fn product(params: &[Param]) -> Product<'_> {
    let next = if params.iter().any(|p| p.values.is_empty()) {
        None
    } else {
        Some(vec![0; params.len()])
    };
    Product { params, next }
}

impl Iterator for Product<'_> {
    type Item = Config;

    fn next(&mut self) -> Option<Config> {
        let idx = self.next.as_mut()?;
        let config: Config = self
            .params
            .iter()
            .zip(idx.iter())
            .filter_map(|(p, &i)| p.values.get(i).copied())
            .collect();
        // Advance the odometer; past the last configuration there is none.
        let mut d = idx.len();
        loop {
            if d == 0 {
                self.next = None;
                break;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < self.params[d].values.len() {
                break;
            }
            idx[d] = 0;
        }
        Some(config)
    }
}

/// The configurations `accepts` keeps, in enumeration order; `Err(count)` with their number
/// when there are more than `max` (counting goes on past `max`, storing nothing more).
pub fn valid_configs(
    params: &[Param],
    accepts: impl Fn(&Config) -> bool,
    max: usize,
) -> Result<Vec<Config>, usize> {
    let mut valid = Vec::new();
    let mut count = 0usize;
    for config in product(params) {
        if accepts(&config) {
            count += 1;
            if count <= max {
                valid.push(config);
            }
        }
    }
    if count > max {
        Err(count)
    } else {
        Ok(valid)
    }
}

/// The order of evaluation: the reference first (when valid), then enumeration order.
pub fn evaluation_order(valid: Vec<Config>, reference: &Config) -> Vec<Config> {
    let mut order = Vec::with_capacity(valid.len());
    if valid.contains(reference) {
        order.push(reference.clone());
    }
    order.extend(valid.into_iter().filter(|c| c != reference));
    order
}

#[cfg(test)]
mod tests {
    use super::super::cache_file::cache_key;
    use super::super::test_spec as spec;
    use super::*;
    use kfoundry_bench::{Limits, Validity};

    fn p(name: &str, values: &[i64]) -> Param {
        Param {
            name: name.into(),
            values: values.to_vec(),
        }
    }

    #[test]
    fn enumerates_in_declaration_order_last_fastest() {
        let params = [p("a", &[1, 2]), p("b", &[10, 20, 30])];
        let all: Vec<Config> = product(&params).collect();
        assert_eq!(
            all,
            vec![
                vec![1, 10],
                vec![1, 20],
                vec![1, 30],
                vec![2, 10],
                vec![2, 20],
                vec![2, 30]
            ]
        );
        assert_eq!(
            product(&[p("a", &[1]), p("b", &[])]).count(),
            0,
            "an empty domain has no configuration"
        );
        assert_eq!(product(&[]).collect::<Vec<_>>(), vec![Vec::<i64>::new()]);
        assert_eq!(cache_key(&vec![16, -1, 0]), "16,-1,0");
    }

    #[test]
    fn filters_by_the_constraints_and_the_device_limits_and_refuses_large_spaces() {
        let spec = spec();
        let sizes = spec.workloads[0].sizes.clone();
        let limits = |max_wg| Limits {
            max_work_group_size: max_wg,
            max_work_item_sizes: vec![max_wg],
            local_mem_bytes: 1 << 16,
            ..Limits::default()
        };
        // require(WG * V <= 256) drops (256, 2) and (256, 4).
        let v = Validity::new(spec.clone(), sizes.clone(), limits(1024));
        let valid = valid_configs(&spec.params, |c| v.accepts(c), 100).unwrap();
        assert_eq!(
            valid,
            vec![
                vec![16, 1],
                vec![16, 2],
                vec![16, 4],
                vec![64, 1],
                vec![64, 2],
                vec![64, 4],
                vec![256, 1]
            ]
        );
        // A device whose work-groups hold at most 64 items drops WG = 256 as well.
        let v = Validity::new(spec.clone(), sizes, limits(64));
        let valid = valid_configs(&spec.params, |c| v.accepts(c), 100).unwrap();
        assert_eq!(valid.len(), 6);
        assert!(valid.iter().all(|c| c[0] <= 64));
        // More than `max`: the full count comes back.
        assert_eq!(valid_configs(&spec.params, |c| v.accepts(c), 4), Err(6));
        assert_eq!(
            valid_configs(&spec.params, |c| v.accepts(c), 6).map(|v| v.len()),
            Ok(6)
        );
        // The reference first, then enumeration order.
        let order = evaluation_order(valid, &vec![64, 2]);
        assert_eq!(order[0], vec![64, 2]);
        assert_eq!(
            order[1..],
            [
                vec![16, 1],
                vec![16, 2],
                vec![16, 4],
                vec![64, 1],
                vec![64, 4]
            ]
        );
    }
}
